"""The cluster view: how the engine reads a cluster, whatever holds its objects.

`source` is the one read interface (`ClusterSource`), the kinds it serves and the errors it
raises; `snapshot` loads `kubectl get -o yaml|json` output into a `MemorySource`; `objects`,
`quantities`, `selectors`, `events` and `usage` read single objects the way the control plane
does; `memo` keeps per-node work between triages while the objects are unchanged.

May import: the standard library and PyYAML. Never the layers, the verdict or any adapter.
"""
