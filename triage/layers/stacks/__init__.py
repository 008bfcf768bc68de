"""GPU-stack knowledge: which components a cluster runs (`components`, from DaemonSets and
pods), which of them should serve each node (`view`, which builds a `plan` per node and finds the
`operator` in any namespace), and how their pods on a node are doing
(`state`). Used by the driver and device-plugin verdicts and by node verification.

May import: `triage.cluster` only.
"""
