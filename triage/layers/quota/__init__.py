"""The quota layer: is the tenant allowed to use the GPUs now?

Namespace ResourceQuotas (enforced when a pod is created, so the evidence of a rejected pod
sits on its Job/ReplicaSet), Kueue (scheduling gates, suspended Jobs, Workload conditions,
Local/ClusterQueues), Volcano PodGroups and Queues, and PriorityClasses. This is tenant-side
governance: a platform policy, never reported as a deployment failure.

`check` runs them in turn: `quotas` (ResourceQuotas, a workload's FailedCreate), `kueue`,
`volcano`, then `quotas` again (PriorityClasses); `base` holds what they share.

May import: `triage.cluster`, `triage.layers.base`, `triage.model`, `triage.signals`.
"""
