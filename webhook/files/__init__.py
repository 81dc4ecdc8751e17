"""Reading the user's files: manifests and fleets (multi-document YAML/JSON, `kind:
List`) and the server's config file, with errors that name the file and document.

Reads files; no network, no decisions.
"""
