"""The run API's routers, one per resource group. Each declares its routes on a
module-level Powertools ``Router``; ``functions.api.app`` lists their routes in
``ROUTERS`` and includes, per request, the ones its path can reach."""
