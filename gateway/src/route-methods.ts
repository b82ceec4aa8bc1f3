/**
 * Which methods a path answers to, so a request with another method gets 405 and an `Allow`
 * header (RFC 9110 §15.5.6) instead of a 404 that says the resource does not exist.
 * Fastify's router matches a method first; this keeps its own table of route patterns.
 *
 * A path that is a route of its own (no parameter: `/api/payout/request`) is that resource, even
 * where a parameter route of another method also matches it (`GET /api/payout/{id}`): "request" is
 * not a payout id, so `GET /api/payout/request` is 405 with the static route's methods, not a
 * validation error of the id.
 */
export class RouteMethods {
  private readonly routes: Array<{ pattern: RegExp; methods: Set<string> }> = [];
  private readonly staticRoutes = new Map<string, Set<string>>();

  add(url: string, methods: string | string[]): void {
    if (!url.includes(':') && !url.includes('*')) {
      const own = this.staticRoutes.get(url) ?? new Set<string>();
      for (const m of Array.isArray(methods) ? methods : [methods]) own.add(m.toUpperCase());
      this.staticRoutes.set(url, own);
    }
    const source = url
      .split('/')
      .map((segment) => (segment === '*' ? '.*' : segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/');
    const pattern = new RegExp(`^${source}$`);
    const existing = this.routes.find((r) => r.pattern.source === pattern.source);
    const list = (Array.isArray(methods) ? methods : [methods]).map((m) => m.toUpperCase());
    if (existing) for (const m of list) existing.methods.add(m);
    else this.routes.push({ pattern, methods: new Set(list) });
  }

  /**
   * The methods `path` answers (sorted; empty when no route matches): its own route's when it is
   * one, else those of every parameter route matching it.
   */
  allowed(path: string): string[] {
    const own = this.staticRoutes.get(path);
    if (own) return [...own].sort();
    const methods = new Set<string>();
    for (const route of this.routes) if (route.pattern.test(path)) for (const m of route.methods) methods.add(m);
    return [...methods].sort();
  }

  /**
   * For a request a parameter route answered: the methods of the route of its own at `path` when
   * there is one and it does not answer `method` (the request is then 405), else undefined.
   */
  shadowedStaticRoute(path: string, method: string): string[] | undefined {
    const own = this.staticRoutes.get(path);
    return own && !own.has(method) ? [...own].sort() : undefined;
  }
}
