"""Step 13: the door serves no tenant; params.tenant other than "" is refused."""
from __future__ import annotations

import json
import logging

from murmur_wsgi.errors import InvalidParamsError

logger = logging.getLogger(__name__)


def check(params: dict) -> None:
    """Refuse -32602 when params.tenant is present and is not ""."""
    if "tenant" not in params:
        return
    tenant = params["tenant"]
    if tenant == "":
        return
    shown = json.dumps(tenant, ensure_ascii=False)
    raise InvalidParamsError(f"Invalid params: tenant {shown} names a tenant; this agent serves "
                             "no tenants, so omit tenant")
