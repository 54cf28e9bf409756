{{/*
How the routers are reached from outside their namespace (router.service, router.ingress, router.httpRoute;
docs/security.md "Exposing the router").
*/}}

{{/*
"true" when anything but the in-cluster ClusterIP path leads to the routers: a NodePort or LoadBalancer
Service (internal or not), an Ingress or an HTTPRoute. The routers' NetworkPolicy then admits
networkPolicy.exposedFrom too.
*/}}
{{- define "kv-tiered-inference.routerReachedFromOutside" -}}
{{- $r := .Values.router -}}
{{- if or (ne $r.service.type "ClusterIP") $r.ingress.enabled $r.httpRoute.enabled -}}true{{- end -}}
{{- end -}}
