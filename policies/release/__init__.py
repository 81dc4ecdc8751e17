"""The gang controller's decisions: which gangs to release, and why the others wait.

Pure, like the rest of `policies`: pods and nodes as plain dicts in, frozen dataclasses
out. The controller (`gangkeeper.webhook.controller`) does the I/O around them.
"""
