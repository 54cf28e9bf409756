"""`kvtier images`: every container image a release makes the cluster pull, for mirroring.

reference parses an image reference as the kubelet and containerd read it (the one parser in the
toolkit); listing renders a release with the pinned Helm and finds every image it runs; report prints
the list (one reference a line, a table, or JSON).
"""
