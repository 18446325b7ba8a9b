package httpapi

import (
	"testing"

	"github.com/logbook/logbook/engine/api"
	"github.com/logbook/logbook/engine/api/apitest"
)

// TestOpenAPIMatchesRoutes: every route of the table is documented in the
// OpenAPI document, and every documented operation is a route, with the
// same query parameters.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	apitest.CheckDocumented(t, OpenAPI(), api.Specs(Routes))
}

// answers checks the JSON answers the tests receive against the document.
var answers = apitest.NewAnswers(OpenAPI(), api.Specs(Routes))
