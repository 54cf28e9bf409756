"""What both cluster flavours use: the pinned control-plane binaries, plain JSON requests to an API
server, discovery, CRD installation (KEDA, the Prometheus Operator, the HyperPod operator's) and the one
deadline loop and log tail every start-up wait shares."""
