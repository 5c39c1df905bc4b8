/* The API reference: Swagger UI pointed at our OpenAPI schema. Settings come
   from data- attributes, so the page needs no inline script (CSP). */
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  if (!root || typeof window.SwaggerUIBundle !== "function") { return; }
  window.SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    domNode: root,
    presets: [window.SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    // No request leaves the site: no online validator badge.
    validatorUrl: null,
    // Requests from "Try it out" carry the token typed into Authorize, not the session.
    withCredentials: false,
  });
})();
