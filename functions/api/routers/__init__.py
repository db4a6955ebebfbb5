"""The run API's routers, one per resource group. Each declares its routes on a
module-level Powertools ``Router``; ``functions.api.app`` includes them all."""
