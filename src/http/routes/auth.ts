/** /api/auth/*: registration, sign-in, tokens, the profile, and email/phone verification. */
import { Effect } from "effect"
import {
  AuthTokens,
  EmailBody,
  EmailVerificationSent,
  EmailVerified,
  EmailVerifyBody,
  GoogleBody,
  LoginBody,
  PhoneBody,
  PhoneVerificationSent,
  PhoneVerifyBody,
  RefreshBody,
  RegisterBody,
  UpdateMeBody,
  UserData,
} from "../../../effects/accounts/schema.ts"
import { Accounts } from "../../../effects/accounts/service.ts"
import { type PreparedCode, type PreparedEmail, Verification } from "../../../effects/accounts/verification.ts"
import { ok, route } from "../route.ts"

const tag = "Account"

const emailSent = (p: PreparedEmail) => ok({ email: p.email, expires_at: p.expiresAt.toISOString() }, { message: "verification link sent" })
const codeSent = (p: PreparedCode) =>
  ok({ phone_number: p.phoneNumber, expires_at: p.expiresAt.toISOString() }, { message: "verification code sent" })

export const authRoutes = [
  route({
    method: "post",
    path: "/api/auth/register",
    auth: "none",
    tag,
    summary: "Create an account",
    description: "Needs an email or a phone_number (or both); sends a verification link and/or an SMS code.",
    body: RegisterBody,
    response: AuthTokens,
    handler: ({ body, ip }) =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        return ok(yield* accounts.register(body, { ip }), { message: "account created" })
      }),
  }),
  route({
    method: "post",
    path: "/api/auth/login",
    auth: "none",
    tag,
    summary: "Sign in with an email or phone number and a password",
    body: LoginBody,
    response: AuthTokens,
    handler: ({ body, ip }) =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        return ok(yield* accounts.login(body, { ip }))
      }),
  }),
  route({
    method: "post",
    path: "/api/auth/google",
    auth: "none",
    tag,
    summary: "Sign in with a Google id_token",
    body: GoogleBody,
    response: AuthTokens,
    handler: ({ body, ip }) =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        return ok(yield* accounts.google(body.id_token, { ip }))
      }),
  }),
  route({
    method: "post",
    path: "/api/auth/refresh",
    auth: "none",
    tag,
    summary: "Exchange a refresh token for new tokens (single use, rotated)",
    body: RefreshBody,
    response: AuthTokens,
    handler: ({ body, ip }) =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        return ok(yield* accounts.refresh(body.refresh_token, { ip }))
      }),
  }),
  route({
    method: "get",
    path: "/api/auth/me",
    auth: "jwt",
    tag,
    summary: "The signed-in account",
    response: UserData,
    handler: ({ principal }) =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        return ok({ user: yield* accounts.get(principal.userId) })
      }),
  }),
  route({
    method: "patch",
    path: "/api/auth/me",
    auth: "jwt",
    tag,
    summary: "Change name and company name",
    body: UpdateMeBody,
    response: UserData,
    handler: ({ body, principal }) =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        return ok({ user: yield* accounts.update(principal.userId, body) })
      }),
  }),
  route({
    method: "post",
    path: "/api/auth/email",
    auth: "jwt",
    tag,
    summary: "Add or change the email address (sends a verification link to it)",
    description: "The address becomes the account's once the link is used.",
    body: EmailBody,
    response: EmailVerificationSent,
    handler: ({ body, principal }) =>
      Effect.gen(function*() {
        const verification = yield* Verification
        return emailSent(yield* verification.startEmailChange(principal.userId, body.email))
      }),
  }),
  route({
    method: "post",
    path: "/api/auth/email/verify",
    auth: "none",
    tag,
    summary: "Verify an email address with the token from the link",
    body: EmailVerifyBody,
    response: EmailVerified,
    handler: ({ body, ip }) =>
      Effect.gen(function*() {
        const verification = yield* Verification
        const verified = yield* verification.verifyEmail(body.token, ip)
        return ok({ email: verified.email, email_verified: true }, { message: "email verified" })
      }),
  }),
  route({
    method: "post",
    path: "/api/auth/email/resend",
    auth: "jwt",
    tag,
    summary: "Send the verification link again",
    response: EmailVerificationSent,
    handler: ({ principal }) =>
      Effect.gen(function*() {
        const verification = yield* Verification
        return emailSent(yield* verification.resendEmail(principal.userId))
      }),
  }),
  route({
    method: "post",
    path: "/api/auth/phone",
    auth: "jwt",
    tag,
    summary: "Add or change the phone number (sends a 6-digit code by SMS)",
    description: "The number becomes the account's once the code is verified.",
    body: PhoneBody,
    response: PhoneVerificationSent,
    handler: ({ body, principal }) =>
      Effect.gen(function*() {
        const verification = yield* Verification
        return codeSent(yield* verification.startPhoneChange(principal.userId, body.phone_number))
      }),
  }),
  route({
    method: "post",
    path: "/api/auth/phone/verify",
    auth: "jwt",
    tag,
    summary: "Verify the phone number with the SMS code",
    body: PhoneVerifyBody,
    response: UserData,
    handler: ({ body, principal }) =>
      Effect.gen(function*() {
        const verification = yield* Verification
        const accounts = yield* Accounts
        yield* verification.verifyPhone(principal.userId, body.code)
        return ok({ user: yield* accounts.get(principal.userId) }, { message: "phone number verified" })
      }),
  }),
  route({
    method: "post",
    path: "/api/auth/phone/resend",
    auth: "jwt",
    tag,
    summary: "Send a new SMS code",
    response: PhoneVerificationSent,
    handler: ({ principal }) =>
      Effect.gen(function*() {
        const verification = yield* Verification
        return codeSent(yield* verification.resendCode(principal.userId))
      }),
  }),
  route({
    method: "get",
    path: "/verify-email",
    auth: "none",
    tag,
    summary: "The page the verification link opens",
    internal: true,
    // A button, not an automatic POST: mail scanners open links, and must not use up the token.
    handler: () => Effect.succeed(ok(undefined, { raw: { body: VERIFY_PAGE, contentType: "text/html; charset=utf-8" } })),
  }),
]

const VERIFY_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Verify your email</title>
<style>body{font:16px system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}button{font:inherit;padding:.5rem 1rem}</style>
</head><body>
<h1>Verify your email</h1>
<p><button id="verify">Verify my email address</button></p>
<p id="result" role="status"></p>
<script>
const token = new URLSearchParams(location.search).get("token") || "";
const result = document.getElementById("result");
document.getElementById("verify").addEventListener("click", async () => {
  const res = await fetch("/api/auth/email/verify", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ token }) });
  const body = await res.json().catch(() => ({}));
  result.textContent = body.success ? "Your email address is verified. You can close this page." : (body.message || "This link does not work.");
});
</script>
</body></html>`
