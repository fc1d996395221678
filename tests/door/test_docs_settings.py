"""Every key of the door's manifest is in docs/manifest.md's table, and every key the table
names is one the manifest takes."""
from __future__ import annotations

from murmur_wsgi.door.manifest import ManifestSchema
from tests.settings_docs import misdocumented_defaults, schema_keys, table_keys

HEADING = "# The door's manifest"


def test_every_manifest_key_is_in_the_table():
    assert sorted(schema_keys(ManifestSchema) - table_keys("manifest.md", HEADING)) == []


def test_the_table_names_only_manifest_keys():
    assert sorted(table_keys("manifest.md", HEADING) - schema_keys(ManifestSchema)) == []


def test_the_table_gives_each_keys_default():
    assert misdocumented_defaults("manifest.md", HEADING, ManifestSchema) == []
