"""The objects that install gangkeeper in a cluster, rendered as plain data.

Pure: builds dicts and text, reads no file and talks to no cluster.
"""
