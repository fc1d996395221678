"""The door: one agent, one session per process, served under Murmur's rules."""
