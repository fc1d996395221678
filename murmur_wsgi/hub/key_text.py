"""hub.yaml's api_keys edited as text, for ``murmur-wsgi hub key``: comments kept.

A block list gets a line, a flow list an entry, a tenant block without the key an
``api_keys: [digest]`` line; the edit must read back (as the hub reads the file) as
exactly the list expected, else the file is rewritten whole, without its comments.
"""
from __future__ import annotations

import yaml

from murmur_wsgi.loading import safe_load


def _child(mapping, key: str):
    """The last ``key: value`` of ``mapping``: a key written twice is read as its last, by
    YAML's reader and so by the hub (the first was the one edited, a list it never read)."""
    found = None, None
    if not isinstance(mapping, yaml.MappingNode):     # a key read through a merge key (<<)
        return found
    for k, v in mapping.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            found = k, v
    return found


def add_digest(text: str, tenant: str, digest: str) -> str:
    """``text`` (hub.yaml) with ``digest`` added to the tenant's api_keys, comments kept.

    The file is edited where the list is (a block list gets a line, a flow list an
    entry); a file laid out otherwise, or whose edit does not read back as the list and
    the digest, is rewritten whole, without its comments."""
    expected = _expected(text, tenant, lambda keys: keys + [digest])
    edited = _added_in_place(text, tenant, digest)
    if edited is not None and _reads_as(edited, expected):
        return edited
    return yaml.safe_dump(expected, sort_keys=False)


def _expected(text: str, tenant: str, change) -> dict:
    """hub.yaml as the hub should read it once the tenant's api_keys are ``change``d, and
    nothing else: the tenant's block and the tenants mapping are copies, so that a block or
    a list another tenant shares (an anchor and its alias, a merge key ``<<``) keeps its
    value there."""
    data = safe_load(text) or {}
    tenants = dict(data["tenants"])
    entry = dict(tenants[tenant] or {})
    entry["api_keys"] = change(list(entry.get("api_keys") or []))
    tenants[tenant] = entry
    data["tenants"] = tenants
    return data


def _reads_as(text: str, expected: dict) -> bool:
    """Whether ``text`` reads (as the hub reads the file) as ``expected``, whole: an edit
    of a list another tenant shares changes that tenant too (a digest of two tenants,
    which the hub refuses)."""
    try:
        return safe_load(text) == expected
    except (yaml.YAMLError, RecursionError):
        return False


def _added_in_place(text: str, tenant: str, digest: str) -> str | None:
    root = yaml.compose(text)
    _, tenants = _child(root, "tenants")
    _, block = _child(tenants, tenant) if isinstance(tenants, yaml.MappingNode) else (0, 0)
    lines = text.splitlines(keepends=True)
    if not isinstance(block, yaml.MappingNode):
        return None
    key_node, keys = _child(block, "api_keys")
    if isinstance(keys, yaml.SequenceNode) and not keys.flow_style and keys.value:
        # NOTE: a block list, indented or not (flow_style None), the new line's dash at its
        # first entry's dash: whatever follows the dashes ("-   digest"), an anchor or a
        # tag on the key's line (where the list's own mark is).
        first, last = keys.value[0], keys.value[-1]
        dash = lines[first.start_mark.line].rfind("-", 0, first.start_mark.column)
        at = last.end_mark.line + (last.end_mark.column > 0)   # after a block scalar too
        if at > len(lines) or dash < 0:
            return None
        if not lines[at - 1].endswith("\n"):
            lines[at - 1] += "\n"
        lines.insert(at, " " * dash + f"- {digest}\n")
        return "".join(lines)
    if isinstance(keys, yaml.SequenceNode) and keys.flow_style:
        start, end = keys.start_mark.index, keys.end_mark.index
        entries = [node.value for node in keys.value] + [digest]
        return text[:start] + "[" + ", ".join(entries) + "]" + text[end:]
    if keys is None and block.value and block.flow_style is False:
        first_key = block.value[0][0]
        indent = " " * first_key.start_mark.column
        lines.insert(first_key.start_mark.line, f"{indent}api_keys: [{digest}]\n")
        return "".join(lines)
    return None


def remove_digest(text: str, tenant: str, digest: str) -> str:
    """``text`` (hub.yaml) without ``digest`` in the tenant's api_keys, comments kept where
    the list is a block list of more than one entry (and the edit reads back as the list
    without it); otherwise rewritten whole."""
    expected = _expected(text, tenant, lambda keys: [d for d in keys if d != digest])
    root = yaml.compose(text)
    _, tenants = _child(root, "tenants")
    _, block = _child(tenants, tenant)
    _, found = _child(block, "api_keys") if isinstance(block, yaml.MappingNode) else (0, 0)
    if isinstance(found, yaml.SequenceNode) and not found.flow_style and len(found.value) > 1:
        lines = text.splitlines(keepends=True)
        for node in found.value:
            if node.value == digest:
                del lines[node.start_mark.line]
                edited = "".join(lines)
                if _reads_as(edited, expected):
                    return edited
                break
    return yaml.safe_dump(expected, sort_keys=False)
