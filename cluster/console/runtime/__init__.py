"""The console's asyncio shell: poller, actions, aiohttp server."""
