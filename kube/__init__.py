"""Live cluster adapter: the only package that imports the kubernetes client."""
