"""HTTP's optional whitespace (RFC 9110, section 5.6.3, "OWS"): space and tab, nothing else.

Every header value either application reads is trimmed of these two only. ``str.strip()``
would also drop a no-break space, a NEL or another Unicode space that a latin-1 header
line can carry: ``x-murmur-task-trust: trusted\\xa0`` would read as ``trusted``,
``Last-Event-ID: 3\\xa0`` as 3 and ``A2A-Version: 1.0\\x85`` as 1.0, where each names
no such value.
"""
OWS = " \t"
