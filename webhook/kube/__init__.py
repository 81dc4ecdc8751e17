"""Talking to the Kubernetes API: the JSON client, the informer, leader election.

Everything here may do network I/O against the API server and nothing here decides
anything about gangs: the server and the controller build on it.
"""
