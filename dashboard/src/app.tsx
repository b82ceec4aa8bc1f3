/**
 * The dashboard's shell: who is signed in, the navigation, and the routes. Client routes live
 * under /dashboard (the gateway answers every /dashboard/* path with this app).
 */
import { Component, type ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Link, Redirect, Route, Router, Switch, useLocation } from 'wouter-preact';
import { api, ApiError, whenSessionLost } from './api';
import { AccountChangeContext, AccountContext } from './account';
import { ApiKeysPage } from './pages/api-keys';
import { InvoiceDetailPage } from './pages/invoice-detail';
import { InvoicesPage } from './pages/invoices';
import { OperatorPage } from './pages/operator';
import { TreasuryPage } from './pages/treasury';
import { PayoutsPage } from './pages/payouts';
import { ProjectSettingsPage } from './pages/project-settings';
import { ProjectsPage } from './pages/projects';
import { SignInPage, SignUpPage } from './pages/sign-in';
import { WebhooksPage } from './pages/webhooks';
import { clearSession, currentToken } from './session';
import type { Merchant } from './types';
import { ErrorMessage, Loading } from './ui';

/** A page that throws while rendering shows the error instead of a blank screen. */
class ErrorBoundary extends Component<{ children: ComponentChildren }, { error: unknown }> {
  override state = { error: undefined as unknown };
  static override getDerivedStateFromError(error: unknown) {
    return { error };
  }
  override render() {
    if (this.state.error) {
      return (
        <main id="main" class="container">
          <h1>Something went wrong</h1>
          <ErrorMessage error={this.state.error} />
          <button type="button" onClick={() => this.setState({ error: undefined })}>
            Try again
          </button>
        </main>
      );
    }
    return this.props.children;
  }
}

function Header({ merchant, onSignOut }: { merchant: Merchant; onSignOut: () => Promise<void> }) {
  const [signingOut, setSigningOut] = useState(false);
  return (
    <header class="site-header">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Link href="/" class="brand">
        coinvoice
      </Link>
      <nav aria-label="Main">
        <Link href="/">Projects</Link>
        {merchant.isAdmin && <Link href="/operator">Operator queue</Link>}
        {merchant.isAdmin && <Link href="/treasury">Treasury</Link>}
      </nav>
      <div class="account">
        <span class="account-email" data-testid="account-email">
          {merchant.email}
        </span>
        <span class={merchant.emailVerified ? 'badge badge-paid' : 'badge badge-waiting'} data-testid="email-verification">
          {merchant.emailVerified ? 'Email verified' : 'Email not verified'}
        </span>
        <button
          type="button"
          disabled={signingOut}
          onClick={() => {
            setSigningOut(true);
            void onSignOut();
          }}
        >
          Sign out
        </button>
      </div>
    </header>
  );
}

function SignedIn({ merchant, onSignOut, onMerchant }: { merchant: Merchant; onSignOut: () => Promise<void>; onMerchant: (m: Merchant) => void }) {
  return (
    <AccountContext.Provider value={merchant}>
      <AccountChangeContext.Provider value={onMerchant}>
      <Header merchant={merchant} onSignOut={onSignOut} />
      <main id="main" class="container">
        <ErrorBoundary>
          <Switch>
            <Route path="/" component={ProjectsPage} />
            <Route path="/projects/:id" component={ProjectSettingsPage} />
            <Route path="/projects/:id/keys" component={ApiKeysPage} />
            <Route path="/projects/:id/invoices" component={InvoicesPage} />
            <Route path="/projects/:id/invoices/:invoiceId" component={InvoiceDetailPage} />
            <Route path="/projects/:id/webhooks" component={WebhooksPage} />
            <Route path="/projects/:id/payouts" component={PayoutsPage} />
            <Route path="/operator" component={OperatorPage} />
            <Route path="/treasury" component={TreasuryPage} />
            <Route path="/signin">
              <Redirect to="/" />
            </Route>
            <Route path="/signup">
              <Redirect to="/" />
            </Route>
            <Route>
              <h1>Page not found</h1>
              <p>
                <Link href="/">Back to your projects</Link>
              </p>
            </Route>
          </Switch>
        </ErrorBoundary>
      </main>
      </AccountChangeContext.Provider>
    </AccountContext.Provider>
  );
}

function Routes() {
  const [merchant, setMerchant] = useState<Merchant | null | undefined>(currentToken() ? undefined : null);
  const [error, setError] = useState<unknown>(undefined);
  const [signOutError, setSignOutError] = useState<unknown>(undefined);
  const [, navigate] = useLocation();

  const loadMe = () => {
    if (!currentToken()) return setMerchant(null);
    api.get<Merchant>('/api/merchant/me').then(setMerchant, (err: unknown) => {
      if (!currentToken()) setMerchant(null);
      else setError(err);
    });
  };
  useEffect(() => {
    whenSessionLost(() => setMerchant(null));
    loadMe();
  }, []);

  const signOut = async () => {
    // The server ends every session of the account (POST /api/merchant/logout, 204); the browser
    // forgets its token either way, and says so if the server could not be told.
    setSignOutError(undefined);
    try {
      await api.post('/api/merchant/logout');
    } catch (err) {
      // 401: the session had already ended, which is what signing out asks for.
      if (!(err instanceof ApiError && err.status === 401)) setSignOutError(err);
    }
    clearSession();
    setMerchant(null);
    navigate('/signin');
  };

  if (error) {
    return (
      <main id="main" class="container">
        <h1>coinvoice dashboard</h1>
        <ErrorMessage error={error} />
      </main>
    );
  }
  if (merchant === undefined) {
    return (
      <main id="main" class="container">
        <Loading what="your account" />
      </main>
    );
  }
  if (merchant === null) {
    const signedIn = () => {
      loadMe();
      navigate('/');
    };
    return (
      <main id="main" class="container narrow">
        {signOutError !== undefined && (
          <div class="notice">
            <p>Signed out in this browser, but coinvoice could not end your sessions: sign in and sign out again.</p>
            <ErrorMessage error={signOutError} />
          </div>
        )}
        <Switch>
          <Route path="/signup">
            <SignUpPage onSignedIn={signedIn} />
          </Route>
          <Route path="/signin">
            <SignInPage onSignedIn={signedIn} />
          </Route>
          <Route>
            <Redirect to="/signin" />
          </Route>
        </Switch>
      </main>
    );
  }
  return <SignedIn merchant={merchant} onSignOut={signOut} onMerchant={setMerchant} />;
}

export function App() {
  return (
    <Router base="/dashboard">
      <Routes />
    </Router>
  );
}
