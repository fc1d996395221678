"""Server-Sent Events: framing, heartbeat, replay."""
