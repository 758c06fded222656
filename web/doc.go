// Package web is Countersign's HTTP side: the Echo server, its routes,
// middleware and handlers. Handlers are thin: they call the agent package
// and render views.
package web
