"""`gangkeeper view`: a read-only web page of the queue, each gang and the fleet.

- `state`: pure; plain Pod/Node/Event dicts in, the snapshot the pages show out.
- `pages`: pure; a snapshot in, HTML (every value from the cluster escaped) and the
  JSON the page polls.
- `source`: reads the cluster through an `Api` (lists only; the user's kubeconfig).
- `server`: the thin HTTP part: a FastAPI app on loopback, a token on every request,
  a background task that re-reads the cluster.
- `assets/`: the stylesheet and the script, served by the app itself (no CDN).
"""
