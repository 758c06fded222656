// Package web is Countersign's HTTP side: the Echo server, its routes,
// middleware and handlers, the in-memory notifier that keeps pages and
// streams live, and NewFor, the server over a core (agent/core; the command
// puts the two together). Handlers are thin: they call the agent package
// and render views.
package web
