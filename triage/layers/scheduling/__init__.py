"""The scheduling layer: `check` judges every node for a pod without one, through
`placement` (every node, once per node class: `exclusions` says whether the pod could
ever use it, `blocks` what stops it there now), `filters` (the scheduler's filter
plugins), `dra` (ResourceClaims against ResourceSlices), `scheduler` (what kube-scheduler
said), `reasons` (signals per reason; `no_candidate` when no node is one) and
`autoscaler` (node autoscaling and preemption).

May import: `triage.cluster`, `triage.layers.base`, `triage.layers.node`,
`triage.layers.verdicts`, `triage.layers.bound`, `triage.layers.stacks`, `triage.model`,
`triage.signals`.
"""
