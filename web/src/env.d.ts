// Vite bundles the stylesheet imported by main.ts.
declare module "*.css";
