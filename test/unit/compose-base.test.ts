import { describe, expect, it } from "vitest";
import { documentBase } from "../../src/compose/images.js";
import { findBaseHref } from "../../src/compose/refs.js";

describe("<base href>, as a browser takes it", () => {
  it("a data: or javascript: base is ignored (the document's own directory), as the HTML standard's frozen base URL falls back", () => {
    for (const href of ["data:text/html,x", "javascript:void(0)", "JavaScript:alert(1)"]) {
      expect(documentBase(`<base href="${href}"><img src="logo.png">`, "/r/report", findBaseHref), href).toEqual({
        dir: "/r/report",
        remote: false,
      });
    }
  });

  it("a web address (also //host) makes references remote; a relative one or a query moves where they resolve", () => {
    expect(documentBase('<base href="https://ci.example.com/x/">', "/r", findBaseHref).remote).toBe(true);
    expect(documentBase('<base href="//cdn.example.com/x/">', "/r", findBaseHref).remote).toBe(true);
    expect(documentBase('<base href="charts/?v=2">', "/r", findBaseHref)).toEqual({ dir: "/r/charts/", remote: false });
    expect(documentBase('<base href="page.html?x=/y/">', "/r", findBaseHref)).toEqual({ dir: "/r", remote: false });
  });
});
