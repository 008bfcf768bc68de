"""The scheduling layer: `check` judges every node for a pod without one, through
`placement` (the reference evaluator, node by node: `exclusions` says whether the pod could
ever use a node, `blocks` what stops it there now), `by_class` (the same answer over node
classes, faster) and `shared` (one evaluation per pod shape in a sweep). The scheduler's
filters are one module each (`filters/`, and `dra` for ResourceClaims against
ResourceSlices), declared in `framework`'s terms and listed in order in `registry`, from
which every table that depends on them is derived; `pod_filters` runs those that read other
objects. `scheduler` reads what kube-scheduler said, `reasons` turns the evaluation into
signals (`no_candidate` when no node is one), `autoscaler` answers for node autoscaling and
preemption.

May import: `triage.cluster`, `triage.layers.base`, `triage.layers.node`,
`triage.layers.node_verdict`, `triage.layers.bound`, `triage.layers.stacks`, `triage.model`,
`triage.signals`.
"""
