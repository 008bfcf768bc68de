"""The scheduler's filter plugins, one module each (`node_name`, `gpu_node`, `node_affinity`,
`taints`, `unschedulable`, `ports`, `resources_fit`, `volumes`, `spread`, `affinity`), each
declaring its `PLUGIN`; `view` is what the filters over other objects share. The registry
(`triage.layers.scheduling.registry`) lists them in order; `pod_filters` runs those that read
other objects for one pod.
"""
