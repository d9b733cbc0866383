"""`minikraft console`: one live page over a running cluster (issue 37).

core/ is pure (the cluster's state as the page shows it, diffs between ticks, the decoded
metadata log, timelines, guided scenarios); runtime/ is the asyncio shell (the poller that reads
the nodes once per interval, the actions that go through the chaos and CLI code, the aiohttp
server that pushes diffs over server-sent events); static/ is the page, plain JS and CSS.
"""
