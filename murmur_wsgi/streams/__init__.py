"""Server-Sent Events both applications write: framing, heartbeat, bounded chunks."""
