"""`kvtier smoke`: the post-install checks of the charts' `helm test` pods, run from this machine.

checks runs them (kvcheck.py's functions) against targets: URLs given on the command line, or a
release in a cluster found by reach (Ready pods, ports, the engines' L2 path) and reached through
portforward (the API server's port-forward, never a pod IP). `kvtier bench` reaches a release the
same way, through reach.
"""
