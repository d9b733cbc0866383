"""Pure console state: no asyncio, os, time, random or socket (ARCHITECTURE.md)."""
