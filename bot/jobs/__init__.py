"""The job runner: the poller, its write-behind, the background tasks' supervisor, delivery bounds.

No ``discord`` import: the Discord side is handed to the poller as a port it implements.
"""
