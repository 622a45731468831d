/**
 * Accounts on the wire: request bodies of /api/auth/* and the User they answer with
 * (DECISIONS.md "Resources": id, name, company_name, email, phone_number, email_verified,
 * phone_verified, created_at). The same schemas validate requests and document them.
 */
import { Schema } from "effect"
import { Email, iso, Text, TzPhone } from "../shared/schema.ts"

const msg = (message: string) => ({ message })

export const NAME_MAX = 200
export const PASSWORD_MIN = 8
/** Long enough for any passphrase, short enough that hashing it stays cheap. */
export const PASSWORD_MAX = 1024

export const Name = Text.check(
  Schema.isMaxLength(NAME_MAX, msg(`must be at most ${NAME_MAX} characters`)),
  Schema.isPattern(/\S/, msg("must not be empty")),
)
export const CompanyName = Schema.NullOr(Text.check(Schema.isMaxLength(NAME_MAX, msg(`must be at most ${NAME_MAX} characters`))))
export const Password = Text.check(
  Schema.isMinLength(PASSWORD_MIN, msg(`must be at least ${PASSWORD_MIN} characters`)),
  Schema.isMaxLength(PASSWORD_MAX, msg(`must be at most ${PASSWORD_MAX} characters`)),
)
/** A credential-like string: present, not absurdly long (the service checks the rest). */
const Opaque = (max: number) =>
  Text.check(Schema.isMinLength(1, msg("must not be empty")), Schema.isMaxLength(max, msg(`must be at most ${max} characters`)))

export const RegisterBody = Schema.Struct({
  name: Name,
  password: Password,
  company_name: Schema.optional(CompanyName),
  email: Schema.optional(Email),
  phone_number: Schema.optional(TzPhone),
})
export type RegisterBody = typeof RegisterBody.Type

export const LoginBody = Schema.Struct({
  // An email if it contains @, else a Tanzanian phone number; checked by the service.
  identifier: Opaque(254),
  password: Opaque(PASSWORD_MAX),
})
export type LoginBody = typeof LoginBody.Type

export const GoogleBody = Schema.Struct({ id_token: Opaque(8192) })
export const RefreshBody = Schema.Struct({ refresh_token: Opaque(256) })

export const UpdateMeBody = Schema.Struct({
  name: Schema.optional(Name),
  company_name: Schema.optional(CompanyName),
})
export type UpdateMeBody = typeof UpdateMeBody.Type

export const EmailBody = Schema.Struct({ email: Email })
export const EmailVerifyBody = Schema.Struct({ token: Opaque(2048) })
export const PhoneBody = Schema.Struct({ phone_number: TzPhone })
export const PhoneVerifyBody = Schema.Struct({
  code: Text.check(Schema.isPattern(/^\d{6}$/, msg("Expected the 6-digit code"))),
})

/** Who the account is and what it has proven: the same in the API and in the row. */
const AccountFields = {
  name: Schema.String,
  company_name: Schema.NullOr(Schema.String),
  email: Schema.NullOr(Schema.String),
  phone_number: Schema.NullOr(Schema.String),
  email_verified: Schema.Boolean,
  phone_verified: Schema.Boolean,
}

/** The account as the API shows it. */
export const User = Schema.Struct({
  id: Schema.Number,
  ...AccountFields,
  created_at: Schema.String,
})
export type User = typeof User.Type

/** What register, login, google and refresh answer. */
export const AuthTokens = Schema.Struct({
  token: Schema.String,
  refresh_token: Schema.String,
  user: User,
})
export type AuthTokens = typeof AuthTokens.Type

export const UserData = Schema.Struct({ user: User })

/** An email link or SMS code on its way: where it went and until when it works. */
export const EmailVerificationSent = Schema.Struct({ email: Schema.String, expires_at: Schema.String })
export const PhoneVerificationSent = Schema.Struct({ phone_number: Schema.String, expires_at: Schema.String })
export const EmailVerified = Schema.Struct({ email: Schema.String, email_verified: Schema.Boolean })

/** The columns of `users` the API needs (USER_COLUMNS, never the password hash), decoded where read. */
export const UserRow = Schema.Struct({
  id: Schema.Int,
  ...AccountFields,
  disabled_at: Schema.NullOr(Schema.Date),
  created_at: Schema.Date,
})
export type UserRow = typeof UserRow.Type

/** USER_COLUMNS plus the password hash: what a sign-in is checked against. */
export const UserWithPasswordRow = Schema.Struct({ ...UserRow.fields, password_hash: Schema.NullOr(Schema.String) })

/** USER_COLUMNS plus the linked Google account: what a Google sign-in links by. */
export const UserWithGoogleRow = Schema.Struct({ ...UserRow.fields, google_sub: Schema.NullOr(Schema.String) })

export const USER_COLUMNS = "id, name, company_name, email, phone_number, email_verified, phone_verified, disabled_at, created_at"

export const toUser = (row: UserRow): User => ({
  id: row.id,
  name: row.name,
  company_name: row.company_name,
  email: row.email,
  phone_number: row.phone_number,
  email_verified: row.email_verified,
  phone_verified: row.phone_verified,
  created_at: iso(row.created_at)!,
})
