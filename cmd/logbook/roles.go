package main

import (
	"slices"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/registry"
	flightsapi "github.com/logbook/logbook/services/flights/httpapi"
	kvapi "github.com/logbook/logbook/services/kv/httpapi"
	notifyapi "github.com/logbook/logbook/services/notify/httpapi"
	ticketsapi "github.com/logbook/logbook/services/tickets/httpapi"
)

// serviceRoles are the roles the services of this binary declare (viewer,
// which every token has, aside): a token file may give any of them, so
// that one file serves every command, and any other role is refused when
// the server starts.
func serviceRoles() []auth.Role {
	return slices.Concat(flightsapi.Roles(), ticketsapi.Roles(), notifyapi.Roles(), kvapi.Roles(), registry.Roles(), []auth.Role{auth.Admin})
}
