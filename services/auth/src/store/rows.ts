/** Row shapes of the auth schema as postgres.js returns them (uuid → string, timestamptz → Date). */
import type { ProjectEnvironment } from '../domain';

export interface MerchantRow {
  id: string;
  email: string;
  name: string;
  created_at: Date;
}

/** A merchant with the password hash: only Login reads it. */
export interface MerchantCredentialsRow extends MerchantRow {
  password_hash: string;
}

export interface SigningKeyRow {
  kid: string;
  private_key_pem: string;
  created_at: Date;
  retired_at: Date | null;
}

/** A project as the merchant sees it: never carries the webhook secret. */
export interface ProjectRow {
  id: string;
  merchant_id: string;
  name: string;
  environment: ProjectEnvironment;
  webhook_url: string | null;
  invoice_lifetime_minutes: number;
  created_at: Date;
  updated_at: Date;
}

/** Everything other services need about a project (GetProjectContext), secret included. */
export interface ProjectContextRow extends ProjectRow {
  webhook_secret: string;
  merchant_email: string;
}

export interface ApiKeyRow {
  id: string;
  project_id: string;
  name: string;
  display_prefix: string;
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

/** What VerifyApiKey needs: the key's state and its project. */
export interface ApiKeyVerificationRow {
  key_id: string;
  revoked_at: Date | null;
  last_used_at: Date | null;
  project_id: string;
  project_name: string;
  environment: ProjectEnvironment;
  merchant_id: string;
  invoice_lifetime_minutes: number;
}
