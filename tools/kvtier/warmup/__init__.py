"""The L2 warm-up from a user's machine (`kvtier warm`): re-running a release's warm-up hook Job
(release.py), or warming the CPU rig (rig.py). The warm-up itself is podscripts/l2_warm.py."""
