/** The MX_HOST of the test apps (test/support/app.ts), whose certificate the global setup makes once. */
export const TEST_MX_HOST = "mx.inbox.localhost"
