"""The real-node flavour: the same control plane plus a kubelet, kube-proxy, containerd and CoreDNS in a
network namespace of their own, so pods run real processes (`kvtier cluster up --runtime real`).

lifecycle (up, down, status) starts the components in order (start), from configuration files (config)
and certificates (pki), in a cgroup subtree (cgroups) and a namespace (netns) whose addresses the
machine's own namespace refuses (routes); machine records what `down` must restore. nodebins and images
are the node's programs and images; client and umbrella_cpu are what its users run inside it.
"""
