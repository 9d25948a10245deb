import { isRoute, type Route, type ServedElsewhere } from '../http/route';
import { worksRoutes } from './works/routes';
import { worksReadRoutes } from './works-read/routes';
import { getTransactionRoute, trackTransactionOperation } from './transactions/routes';
import { apiKeysRoutes } from './api-keys/routes';
import { createSessionRoute } from './sessions/routes';
import { healthRoutes } from './health/routes';
import { docsRoutes } from './docs/routes';
import { queuesBoardOperation } from './queues-board/board';
import { devIdpJwksRoute } from './dev-idp/routes';

/**
 * Every operation the web serves, each declared once in its folder, in the OpenAPI document's order; the
 * router serves the routes among them in this order too (no two of them match the same method and path).
 */
export const OPERATIONS: readonly (Route | ServedElsewhere)[] = [
  ...worksRoutes,
  ...worksReadRoutes,
  getTransactionRoute,
  trackTransactionOperation,
  ...apiKeysRoutes,
  createSessionRoute,
  ...healthRoutes,
  ...docsRoutes,
  queuesBoardOperation,
  devIdpJwksRoute,
];

/** The operations the Koa router serves (web/http/mount.ts). */
export const ROUTES: readonly Route[] = OPERATIONS.filter(isRoute);
