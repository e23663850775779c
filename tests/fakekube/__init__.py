"""Modules of tests/fake-kube-apiserver, a Kubernetes API server for tests (standard library only).

certs     CA, server and client certificates through the openssl CLI
errors    metav1.Status bodies phrased as the real API server phrases them
kinds     the built-in resource types, defaults and validation
selection label and field selectors
patch     JSON merge patch, JSON patch, strategic merge patch
store     objects, the global resourceVersion, history, watchers
rbac      RBAC authorization
server    HTTP handling, authentication, discovery, watch, faults, audit log
cel       a subset of CEL for ValidatingAdmissionPolicies
admission ValidatingAdmissionPolicy enforcement
proto     protobuf request bodies of kubectl's typed clients
quantity  resource.Quantity parsing and canonical form
schema    custom resources against their openAPIV3Schema
registry  resource types and discovery documents
table     meta.k8s.io Table responses for kubectl get
"""
