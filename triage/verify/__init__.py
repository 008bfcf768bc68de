"""Node verification and preflight: clients of the layers' node checks, not a second engine.

`node` verifies GPU nodes with the design brief's fixed template, `checks` holds its checks
(built on `triage.layers.node.assess_node` and `triage.layers.stacks`), `preflight` records the
cluster-wide baseline.

May import: `triage.cluster`, `triage.layers`, `triage.model`, `triage.playbooks`,
`triage.config`, `triage.names`.
"""
