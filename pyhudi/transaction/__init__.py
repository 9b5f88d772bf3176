"""Writers side by side: heartbeats, the table lock, and conflict resolution at commit."""
