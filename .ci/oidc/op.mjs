// A real OpenID Provider for the single sign-on tests: oidc-provider with
// its development sign-in page (any login name; the password is ignored),
// users and groups from OP_USERS, clients from OP_CLIENTS. POST
// /test/users/<id> {"groups": [...]} changes a user's groups, as an IdP
// admin would. OP_CLOCK_OFFSET_S runs the provider's clock that many
// seconds in the past (tokens it issues are then already expired).
const offset = Number(process.env.OP_CLOCK_OFFSET_S || 0) * 1000;
if (offset) {
  const real = Date.now;
  Date.now = () => real() - offset;
}
const { default: Provider } = await import('oidc-provider');
import http from 'node:http';

const port = Number(process.env.OP_PORT);
const issuer = `http://127.0.0.1:${port}`;
const users = JSON.parse(process.env.OP_USERS || '{}');
const clients = JSON.parse(process.env.OP_CLIENTS || '[]');

const provider = new Provider(issuer, {
  clients,
  cookies: { keys: ['countersign-test-cookie-key'] },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
  scopes: ['openid', 'email', 'profile', 'groups', 'offline_access'],
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true } },
  pkce: { required: () => true },
  ttl: process.env.OP_IDTOKEN_TTL ? { IdToken: Number(process.env.OP_IDTOKEN_TTL) } : undefined,
  async findAccount(ctx, id) {
    const u = users[id];
    if (!u) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: u.email, email_verified: true, name: u.name, groups: u.groups };
      },
    };
  },
  // First-party clients: no consent screen.
  async loadExistingGrant(ctx) {
    const grant = new provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});
provider.proxy = false;

const callback = provider.callback();
http.createServer((req, res) => {
  const m = req.url.match(/^\/test\/users\/([^/?]+)$/);
  if (m && req.method === 'POST') {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const u = users[decodeURIComponent(m[1])];
      if (!u) { res.writeHead(404).end(); return; }
      Object.assign(u, JSON.parse(body));
      res.writeHead(204).end();
    });
    return;
  }
  callback(req, res);
}).listen(port, '127.0.0.1', () => console.log(`ready ${issuer}`));
