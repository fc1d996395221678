"""Every setting hub.yaml takes is in docs/hub.md's table of settings, and every key the
table names is one hub.yaml takes: an operator reads what the hub does with each."""
from __future__ import annotations

from murmur_wsgi.hub.config_schema import HubSchema
from tests.settings_docs import misdocumented_defaults, schema_keys, table_keys

WHOLE = frozenset({"pricing", "tenants"})      # documented as blocks


def test_every_setting_is_in_the_table():
    missing = schema_keys(HubSchema, WHOLE) - table_keys("hub.md", "## Configuration (hub.yaml)")
    assert sorted(missing) == []


def test_the_table_names_only_settings():
    named = {key for key in table_keys("hub.md", "## Configuration (hub.yaml)")
             if key.split(".")[0] not in WHOLE}
    assert sorted(named - schema_keys(HubSchema, WHOLE)) == []


def test_the_table_gives_each_settings_default():
    assert misdocumented_defaults("hub.md", "## Configuration (hub.yaml)", HubSchema) == []
