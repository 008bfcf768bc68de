"""The layers, each a check behind one interface (`base`: a `Context` in, an `CheckResult` out),
in the order the engine runs them: `bound` (a pod on its node: driver, runtime, device
admission), `scheduling` (a pod without a node), `quota` (ResourceQuotas, Kueue, Volcano).

The two lowest layers are judged per node: `driver` and `device_plugin` each give a `NodeVerdict`
(`verdicts`), `node` combines them into a node's health, `health` remembers that across
triages, and `stacks` knows which GPU stack (GPU Operator in any namespace, GKE/EKS/AKS
managed, plugin-only, DRA driver, MIG) serves a node.

May import: `triage.cluster`, `triage.model`, `triage.signals`, `triage.config`,
`triage.target`. Never the engine, the verdict, rendering or any adapter.
"""
