package httpapi

import (
	"testing"

	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/engine/httpkit/openapitest"
)

// TestOpenAPIMatchesRoutes: every route of the table is documented in the
// OpenAPI document, and every documented operation is a route, with the
// same query parameters.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	openapitest.CheckDocumented(t, OpenAPI(), httpkit.Specs(Routes))
}

// answers checks the JSON answers the tests receive against the document.
var answers = openapitest.NewAnswers(OpenAPI(), httpkit.Specs(Routes))
