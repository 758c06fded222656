// Package web is Countersign's HTTP side: the Echo server, its routes,
// middleware and handlers, the in-memory notifier that keeps pages and
// streams live, and NewApp, which wires the core and the server. Handlers are
// thin: they call the agent package and render views.
package web
